"""free_ports.py N — prints N distinct TCP ports that were free on 127.0.0.1
a moment ago (the kernel picks them; every socket is held open until all N
are known, so they differ), for the scripts that start servers on loopback
(scripts/e2e_vllm.sh, scripts/screenshots.sh)."""

import socket
import sys

socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
