"""Entry point: `python main.py crawl NAME URL` does what the `spider` console script does."""

from spider._entry import main

if __name__ == "__main__":
    main()
