import Foundation

/// The one list of command groups. Each issue adds its group here and nowhere else.
public enum CommandRegistry {
    public static let groups: [Command] = [
        DemoCommand.command,
        TokenCommands.command,
        EMVCommands.command,
        DeploymentCommands.initCommand,
        DeploymentCommands.serve,
        DeploymentCommands.up,
        DeploymentCommands.status,
        PKICommands.command,
        HTTPCommands.command,
        DeviceCommands.command,
        BenchCommands.command,
        TerminalCommands.command,
        AnalyticsCommands.command,
        AppCommands.command,
        MerchantCommands.command,
        NetworkCommands.command,
        ChaosCommand.command,
        BrowserCommands.command,
    ]

    public static let root = Command(
        name: "orchard",
        summary: "Orchard: an open implementation of the Apple Pay card payment system.",
        subcommands: groups
    )
}
