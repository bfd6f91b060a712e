// Package demo is the pipeline `jobpipe demo` (and `make demo`) runs: five kinds that tell the users'
// stories, thousands of jobs with duplicates among them, two dispatchers working them, live progress,
// and a summary the demo checks itself against what the handlers saw and what the tables hold.
package demo
