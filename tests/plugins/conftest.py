"""The toy profile needs the toy package on the path, which only the tests' subprocesses have:
it is not collected as a profile test."""

collect_ignore = ["toy.yaml"]
