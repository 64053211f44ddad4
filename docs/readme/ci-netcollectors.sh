# network collectors: root tests create veth pairs in namespaces (ip) and compare with ethtool -S
command -v ip >/dev/null || apt-get install -y iproute2
command -v ethtool >/dev/null || apt-get install -y ethtool
