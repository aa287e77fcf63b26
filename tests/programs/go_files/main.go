// A Go program, linked dynamically with cgo: it loads ldpfuse, but Go's os package makes
// its system calls itself (inline), never through libc's functions. It reads, writes,
// lists and stats files in DIR. Used by tests/test_escapes.py: under --watch-escapes it
// sees the mount as a native directory.
package main

// #include <stdlib.h>
import "C"

import (
	"fmt"
	"os"
	"sort"
)

func main() {
	dir := os.Args[1]
	data, err := os.ReadFile(dir + "/hello")
	if err != nil {
		fmt.Println("read:", err)
	} else {
		fmt.Printf("read: %s", data)
	}
	if err := os.WriteFile(dir+"/from-go", []byte("written by go\n"), 0644); err != nil {
		fmt.Println("write:", err)
	}
	if err := os.Mkdir(dir+"/go-dir", 0755); err != nil {
		fmt.Println("mkdir:", err)
	}
	if err := os.Rename(dir+"/from-go", dir+"/go-dir/renamed"); err != nil {
		fmt.Println("rename:", err)
	}
	for _, d := range []string{dir, dir + "/go-dir"} {
		entries, err := os.ReadDir(d)
		if err != nil {
			fmt.Println("readdir:", err)
		}
		names := []string{}
		for _, e := range entries {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		fmt.Println("entries:", names)
	}
	st, err := os.Stat(dir + "/go-dir/renamed")
	if err != nil {
		fmt.Println("stat:", err)
	} else {
		fmt.Println("size:", st.Size(), "mode:", st.Mode())
	}
}
