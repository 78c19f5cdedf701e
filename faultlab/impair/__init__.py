"""Packet impairments (latency, jitter, loss, rate, duplication, reordering, corruption) at the
lab's router, without netem.

Three mechanisms, each used only when a step asks for what it does: `tbf` on the router's
egress interface for rate, an iptables `statistic` rule for independent loss, and a
userspace queue for the rest: an NFQUEUE consumer in the router's namespace (`worker`), speaking
the kernel's nfnetlink_queue protocol itself (`nfqueue`) around a sans-I/O core that decides each
packet's fate on a clock it is given (`core`). `engine` puts them together for the faults.
"""
