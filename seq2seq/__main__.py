"""``python -m seq2seq`` runs the command line."""

from seq2seq.cli import main

main()
