// Package docmark pastes a program's report into a Markdown document,
// between two HTML-comment markers named after the program, so that the
// figures in the document have one source: the program that measured them
// (zklock-bench and zklock-scale with -doc).
package docmark

import (
	"fmt"
	"os"
	"strings"
)

// Markers returns the begin and end markers of program's block.
func Markers(program string) (begin, end string) {
	return "<!-- " + program + ": begin -->", "<!-- " + program + ": end -->"
}

// Write replaces what lies between program's markers in file with report,
// as a preformatted block.
func Write(file, program, report string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	out, err := Replace(string(data), program, "\n```text\n"+strings.TrimRight(report, "\n")+"\n```\n")
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return os.WriteFile(file, []byte(out), 0o644)
}

// Replace puts body between program's markers in doc.
func Replace(doc, program, body string) (string, error) {
	begin, end := Markers(program)
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %q ... %q markers", begin, end)
	}
	return doc[:i+len(begin)] + body + doc[j:], nil
}
