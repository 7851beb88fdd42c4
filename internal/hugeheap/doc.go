// Package hugeheap backs the start of the Go heap with transparent huge
// pages, so that a short-lived hermes process takes a handful of page
// faults for its heap instead of hundreds.
//
// Why: a hermes CLI process spends most of its life starting. Its package
// initialisation allocates about 1.5 MB (regexps, API type registries) and
// the runtime touches every 4 KiB page of it one fault at a time. On a
// virtual machine a fault costs 10-30 µs, so those faults were a seventh
// of `hermes --version`. The kernel in its usual THP mode ("madvise")
// gives huge pages only to memory that asks, and the Go runtime no longer
// asks for its heap (it stopped in Go 1.21.1, for long-lived processes
// whose freed memory khugepaged kept re-collapsing).
//
// Importing the package (for its side effect, as early as possible) marks
// the heap mapping that exists when it initialises - the first few
// megabytes - MADV_HUGEPAGE and collapses the part already touched
// (MADV_COLLAPSE). Mappings the runtime adds later are left alone, so a
// long-lived process gains at most that first mapping's size.
//
// Every step is advice: where the kernel has no THP, or refuses, nothing
// changes but the few microseconds spent asking; where the administrator
// set THP to "never", nothing is asked. Other systems than Linux
// get a no-op.
package hugeheap
