# udp probes (probes/netqueue, lockstat, udpdrop): the veth lab needs ip/tc (iproute2) and ethtool.
command -v ip >/dev/null && command -v tc >/dev/null || apt-get install -y iproute2
command -v ethtool >/dev/null || apt-get install -y ethtool
