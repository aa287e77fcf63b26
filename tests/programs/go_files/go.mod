module gofiles

go 1.20
