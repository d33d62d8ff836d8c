module github.com/boardd/boardd/clients/go

go 1.21
