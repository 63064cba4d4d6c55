"""Entry point: `python main.py crawl NAME URL` does what the `spider` console script does."""

from spider.cli import main

if __name__ == "__main__":
    main()
