# This directory is a package to install, not tests: keep pytest's doctest
# collection from importing its modules into the test process.
collect_ignore_glob = ["*.py"]
