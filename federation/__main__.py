from federation.cli import main

main()
