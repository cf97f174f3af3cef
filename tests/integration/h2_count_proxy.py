"""h2_count_proxy.py — a loopback TCP proxy in front of a real HTTP/2 (gRPC)
server that counts the client connections it accepts and can end the first
one the way a restarting collector does.

Owns: accepting on a free 127.0.0.1 port, relaying bytes both ways to the
upstream address, counting accepted connections, recording the type of every
frame each client sent (client_frames[i]: connection i's, in order; not with
tls=True, where the bytes are only relayed and counted), and ending or
rewriting the first connection. cut="goaway" or cut="close" end it when
the client starts its second request on it: the client-to-server byte stream is read as HTTP/2 frames
(after the 24-byte preface, 9-byte frame headers) and the HEADERS frame of a
second stream is not forwarded; instead the proxy sends the client a GOAWAY
(NO_ERROR, last stream = the first one: a server shutting down, which has
not processed the new stream) and closes both sides ("goaway"), or just
closes both sides ("close": a collector killed). cut="idle-close" instead
reads the server-to-client frames and, right after the first response's
trailers (a HEADERS frame with END_STREAM and END_HEADERS) have been
forwarded, closes the upstream side and ends the client side gracefully (FIN
after the data; what the client sends then is read and dropped, so no reset
discards the reply): a collector restarted between two exports.
cut="no-trailers" rewrites the first response on the first connection
instead: its trailers become an empty DATA frame with END_STREAM (a reply
with its message but no grpc-status), and cut="no-message" also drops that
response's DATA frames (neither message nor grpc-status); the connection
stays open. Later connections are relayed untouched. Used by
test_jaeger_export.py and test_otlp_tls.py to check that the gRPC exporter
keeps one connection and reconnects, losing nothing, when it ends.
"""
import socket
import struct
import threading

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FRAME_HEADERS, FRAME_GOAWAY = 0x1, 0x7
FRAME_DATA = 0x0
FLAG_END_STREAM, FLAG_END_HEADERS = 0x1, 0x4



def _recv_or_end(sock):
    """The next bytes from `sock`, or b"" once it has ended or failed."""
    try:
        return sock.recv(65536)
    except OSError:
        return b""

class H2CountProxy:
    def __init__(self, upstream: str, cut: str = None, tls: bool = False):
        """tls: the bytes are TLS records, relayed as they are (count only)."""
        assert not (tls and cut)
        host, port = upstream.rsplit(":", 1)
        self.tls = tls
        self.upstream = (host, int(port))
        self.cut = cut
        self.accepted = 0
        self.cuts = 0
        self.client_frames = []
        self._lock = threading.Lock()
        self._socks = []
        self._ended = set()  # client sockets ended by idle-close: their data is dropped
        self._lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._lsock.bind(("127.0.0.1", 0))
        self._lsock.listen(16)
        self.addr = f"127.0.0.1:{self._lsock.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._lsock.close()
        with self._lock:
            for s in self._socks:
                _close(s)
        self._thread.join(timeout=10)

    def _accept_loop(self):
        while True:
            try:
                client, _ = self._lsock.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream, timeout=10)
            upstream.settimeout(None)
            with self._lock:
                self.accepted += 1
                cut = self.cut if self.accepted == 1 else None
                self._socks += [client, upstream]
                frames = []
                self.client_frames.append(frames)
            if cut in ("idle-close", "no-trailers", "no-message"):
                threading.Thread(target=self._pump_until_first_trailers, args=(upstream, client, cut),
                                 daemon=True).start()
                cut = None
            else:
                threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()
            if self.tls:
                threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
            else:
                threading.Thread(target=self._pump_client_frames, args=(client, upstream, cut, frames),
                                 daemon=True).start()

    def _pump_client_frames(self, client, upstream, cut, frames):
        """Client to server, whole frames only, each frame's type appended
        to `frames`; with `cut`, until a second stream's HEADERS: then the
        cut (see the top)."""
        buf = b""
        pos = None         # start of the next frame header; None: preface not yet read
        first_stream = None
        while True:
            data = _recv_or_end(client)
            if not data:
                break
            with self._lock:
                if client in self._ended:
                    continue  # idle-close: read and drop until the client closes
            buf += data
            if pos is None:
                if len(buf) < len(PREFACE):
                    continue
                pos = len(PREFACE)
            while len(buf) - pos >= 9:
                length = int.from_bytes(buf[pos:pos + 3], "big")
                ftype = buf[pos + 3]
                stream = struct.unpack(">I", buf[pos + 5:pos + 9])[0] & 0x7FFFFFFF
                if len(buf) < pos + 9 + length:
                    break
                if ftype == FRAME_HEADERS and first_stream is None:
                    first_stream = stream
                elif cut and ftype == FRAME_HEADERS and stream != first_stream:
                    with self._lock:
                        self.cuts += 1
                    try:
                        upstream.sendall(buf[:pos])
                        if cut == "goaway":
                            client.sendall(struct.pack(">I", 8)[1:] + bytes([FRAME_GOAWAY, 0]) +
                                           struct.pack(">III", 0, first_stream, 0))
                    except OSError:
                        pass
                    _close(upstream)
                    _close(client)
                    return
                with self._lock:
                    frames.append(ftype)
                pos += 9 + length
            try:
                upstream.sendall(buf[:pos])
            except OSError:
                break
            buf, pos = buf[pos:], 0
        _close(client)
        _close(upstream)


    def _pump_until_first_trailers(self, upstream, client, cut):
        """Server to client, whole frames only (the server sends no
        preface), until the first END_STREAM HEADERS frame: then the cut
        (see the top); after a rewrite, the rest relayed as it is."""
        buf = b""
        while True:
            data = _recv_or_end(upstream)
            if not data:
                break
            buf += data
            pos, out = 0, b""
            while len(buf) - pos >= 9:
                end = pos + 9 + int.from_bytes(buf[pos:pos + 3], "big")
                if len(buf) < end:
                    break
                ftype, flags = buf[pos + 3], buf[pos + 4]
                frame, pos = buf[pos:end], end
                stream = struct.unpack(">I", frame[5:9])[0] & 0x7FFFFFFF
                if cut == "no-message" and ftype == FRAME_DATA and stream:
                    continue
                if cut in ("no-trailers", "no-message") and ftype == FRAME_HEADERS and flags & FLAG_END_STREAM:
                    with self._lock:
                        self.cuts += 1
                    out += bytes([0, 0, 0, FRAME_DATA, FLAG_END_STREAM]) + frame[5:9]
                    try:
                        client.sendall(out + buf[pos:])
                    except OSError:
                        pass
                    _pump(upstream, client)
                    return
                out += frame
                if ftype == FRAME_HEADERS and flags & FLAG_END_STREAM and flags & FLAG_END_HEADERS:
                    with self._lock:
                        self.cuts += 1
                    with self._lock:
                        self._ended.add(client)
                    try:
                        client.sendall(out)
                        client.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    _close(upstream)
                    return
            try:
                client.sendall(out)
            except OSError:
                break
            buf = buf[pos:]
        _close(upstream)
        _close(client)


def _pump(src, dst):
    while True:
        try:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
        except OSError:
            break
    _close(src)
    _close(dst)


def _close(s):
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
