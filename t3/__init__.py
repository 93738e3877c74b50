"""The ``t3`` command line: parse, call the code that does the work, print (:mod:`t3.cli`)."""
