//go:build cgo

// With cgo the program is linked dynamically (it loads the preload), and Go still makes
// its own system calls.

package main

// #include <unistd.h>
import "C"

var _ = C.getpid
