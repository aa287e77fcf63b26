// A Go program that writes, reads, renames, lists, stats, walks and removes files in DIR
// (its first argument) with the os package, whose system calls Go makes itself. Built by
// tests/test_supervisor.py twice: CGO_ENABLED=0 (statically linked) and with cgo (cgo.go:
// dynamically linked); under --supervise both must print what they print on a native
// directory.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

func main() {
	dir := os.Args[1]
	must := func(err error) {
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "g.txt"), []byte("from go\n"), 0644))
	b, err := os.ReadFile(filepath.Join(dir, "g.txt"))
	must(err)
	fmt.Print(string(b))
	must(os.MkdirAll(filepath.Join(dir, "gd", "sub"), 0755))
	must(os.Rename(filepath.Join(dir, "g.txt"), filepath.Join(dir, "gd", "h.txt")))
	ents, err := os.ReadDir(dir)
	must(err)
	names := []string{}
	for _, e := range ents {
		names = append(names, fmt.Sprintf("%s dir=%v", e.Name(), e.IsDir()))
	}
	sort.Strings(names)
	fmt.Println(names)
	st, err := os.Stat(filepath.Join(dir, "gd", "h.txt"))
	must(err)
	fmt.Println(st.Size(), st.Mode())
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		must(err)
		rel, _ := filepath.Rel(dir, p)
		fmt.Println(rel, info.IsDir())
		return nil
	})
	must(os.RemoveAll(filepath.Join(dir, "gd")))
	_, err = os.Stat(filepath.Join(dir, "gd"))
	fmt.Println(os.IsNotExist(err))
}
