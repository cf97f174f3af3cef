/*
 * pid_roles.c — pid -> role hash of one trace file (pid_roles.h): open
 * addressing, linear probing, kept at most half full.
 */
#include "analyze/pid_roles.h"

#include <stdlib.h>
#include <string.h>

static size_t pid_hash(int64_t pid) {
    uint64_t x = (uint64_t)pid + 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return (size_t)(x ^ (x >> 31));
}

static mst_an_pid_role *slot_of(mst_an_pid_role *slots, size_t cap, int64_t pid) {
    for (size_t p = pid_hash(pid) & (cap - 1);; p = (p + 1) & (cap - 1))
        if (!slots[p].role || slots[p].pid == pid) return &slots[p];
}

static bool grow(mst_an_pid_roles *t) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    mst_an_pid_role *ns = calloc(cap, sizeof *ns);
    if (!ns) return false;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].role) *slot_of(ns, cap, t->slots[i].pid) = t->slots[i];
    free(t->slots);
    t->slots = ns;
    t->cap = cap;
    return true;
}

bool mst_an_pid_roles_set(mst_an_pid_roles *t, int64_t pid, const char *name, size_t len) {
    size_t n = len;
    for (size_t i = 0; i + 1 < len; i++)
        if (name[i] == ' ' && name[i + 1] == '(') {
            n = i;
            break;
        }
    if (mst_an_pid_roles_get(t, pid)) return true;
    if ((t->count + 1) * 2 > t->cap && !grow(t)) return false;
    char *c = malloc(n + 1);
    if (!c) return false;
    if (n) memcpy(c, name, n);
    c[n] = 0;
    *slot_of(t->slots, t->cap, pid) = (mst_an_pid_role){pid, c, n};
    t->count++;
    return true;
}

const mst_an_pid_role *mst_an_pid_roles_get(const mst_an_pid_roles *t, int64_t pid) {
    if (!t->cap) return NULL;
    const mst_an_pid_role *s = slot_of(t->slots, t->cap, pid);
    return s->role ? s : NULL;
}

void mst_an_pid_roles_free(mst_an_pid_roles *t) {
    for (size_t i = 0; i < t->cap; i++) free(t->slots[i].role);
    free(t->slots);
    memset(t, 0, sizeof *t);
}
