package main

// The scale figures in the performance document are this program's output,
// pasted by the program itself between its markers (internal/docmark, -doc),
// as zklock-bench does with its own.
const docProgram = "zklock-scale"
