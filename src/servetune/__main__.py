from servetune.cli import main

main()
