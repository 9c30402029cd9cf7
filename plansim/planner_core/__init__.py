"""planner_core"""
