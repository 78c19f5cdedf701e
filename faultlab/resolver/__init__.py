"""The lab's resolver: a small DNS server of faultlab's in the router, for runs with a `dns`
step. It answers the lab's names (the target's and the profile's `hosts`) with the addresses the
client's /etc/hosts would have held, forwards other names to the real upstream (a remote
target's: the uplink's DNS) or refuses them, and a `dns` step switches how it answers the
target's names (faultlab.faults.dns) through its control channel."""
