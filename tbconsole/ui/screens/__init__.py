"""Screens: main (panels), transcript (one trial), and the modals (help, decision, confirm, log)."""
