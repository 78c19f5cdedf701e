from faultlab.cli import main

main()
