"""Give this container an IPv4 address on the loopback device, as an alias (lo:1): `add_address.py 192.0.2.14`.
The image has no iproute2; the ioctls of ifconfig need only Python and CAP_NET_ADMIN."""

import fcntl
import socket
import struct
import sys

SIOCSIFADDR, SIOCSIFNETMASK = 0x8916, 0x891C


def request(address):
    return struct.pack("16sH2s4s8s", b"lo:1", socket.AF_INET, b"", socket.inet_aton(address), b"")


with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
    fcntl.ioctl(sock, SIOCSIFADDR, request(sys.argv[1]))
    fcntl.ioctl(sock, SIOCSIFNETMASK, request("255.255.255.255"))
