package main

import (
	"fmt"
	"os"
	"strings"
)

// The scale figures in the performance document are this program's output,
// pasted by the program itself between two markers (-doc), as zklock-bench
// does with its own.
const (
	docBegin = "<!-- zklock-scale: begin -->"
	docEnd   = "<!-- zklock-scale: end -->"
)

// writeDoc replaces what lies between the markers in file with report, as a
// preformatted block.
func writeDoc(file, report string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("zklock-scale: %w", err)
	}
	out, err := replaceBetween(string(data), "\n```text\n"+strings.TrimRight(report, "\n")+"\n```\n")
	if err != nil {
		return fmt.Errorf("zklock-scale: %s: %w", file, err)
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
