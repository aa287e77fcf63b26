module gofiles

go 1.18
