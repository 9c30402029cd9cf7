from plansim.cli import main

main()
