from retinue.cli.app import main

main()
