from traceattr.cli import main

main()
