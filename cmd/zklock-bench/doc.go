package main

// The performance document's figures are this program's output, pasted by
// the program itself between its markers (internal/docmark), so that they
// have one source: -doc docs/performance.md (make bench does it).
const docProgram = "zklock-bench"
