module boardd.local/tests/clients/gocheck

go 1.21

require github.com/boardd/boardd/clients/go v0.0.0

replace github.com/boardd/boardd/clients/go => ../../../clients/go
