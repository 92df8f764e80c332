"""The sources ``seq2seq fetch`` builds corpora from, one module each: ``tatoeba`` (the manythings selection),
``tatoeba_full`` (Tatoeba's exports), ``hsk`` (the HSK 3.0 sentences) and ``cedict`` (a CC-CEDICT lexicon);
``common`` is the corpus directory they all write, ``download`` the checked downloads."""
