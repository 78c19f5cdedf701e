"""Packet capture in the lab, and analysis of pcap files."""
