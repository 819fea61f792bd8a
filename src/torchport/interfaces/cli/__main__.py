from torchport.interfaces.cli import main

main()
