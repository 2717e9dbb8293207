from tasuki.cli.main import main

main()
