module github.com/zklock/zklock

go 1.24

require github.com/go-zookeeper/zk v1.0.4
