"""retune"""
