package ksym

//go:generate go tool bpf2go -tags linux -target bpfel -type ksym_addrs -type ksym_name -type ksym_names ksym bpf/ksym.bpf.c -- -I../include -O2 -g -Wall -Werror
