from plansim.cli import run

run()
