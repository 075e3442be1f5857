from council.cli.main import main

main()
