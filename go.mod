module github.com/inaemu/inaemu

go 1.26.8

require (
	github.com/gopacket/gopacket v1.7.7
	github.com/leanovate/gopter v0.2.11
	github.com/songgao/water v0.0.0-20200317203138-2b4b6d7c09d8
	github.com/stretchr/testify v1.12.1
	github.com/vishvananda/netlink v1.3.1
	go.yaml.in/yaml/v3 v3.0.5
	golang.org/x/sys v0.45.0
)

require (
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/net v0.55.0 // indirect
)
