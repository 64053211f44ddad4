package udpdrop

//go:generate go tool bpf2go -tags linux -target bpfel -type port_drop_key -type udpdrop_kind -type udpdrop_lost -type udpdrop_hook -type self_cost udpdrop bpf/udpdrop.bpf.c -- -I../include -O2 -g -Wall -Werror
