"""``python -m seq2seq`` runs the command line."""

from seq2seq.cli import main

if __name__ == "__main__":  # not when a spawned worker process imports this module as its __mp_main__
    main()
