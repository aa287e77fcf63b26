module example.com/gowalk

go 1.19
