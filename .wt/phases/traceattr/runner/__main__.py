from traceattr.runner.loop import main

main()
