package main

import (
	"fmt"
	"os"
	"strings"
)

// The performance document's figures are this program's output, pasted by
// the program itself between two markers, so that they have one source:
// -doc docs/performance.md (make bench does it).
const (
	docBegin = "<!-- zklock-bench: begin -->"
	docEnd   = "<!-- zklock-bench: end -->"
)

// writeDoc replaces what lies between the markers in file with report, as a
// preformatted block.
func writeDoc(file, report string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	out, err := replaceBetween(string(data), "\n```text\n"+strings.TrimRight(report, "\n")+"\n```\n")
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return os.WriteFile(file, []byte(out), 0o644)
}

// replaceBetween puts body between the markers of doc.
func replaceBetween(doc, body string) (string, error) {
	i := strings.Index(doc, docBegin)
	j := strings.Index(doc, docEnd)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %q ... %q markers", docBegin, docEnd)
	}
	return doc[:i+len(docBegin)] + body + doc[j:], nil
}
