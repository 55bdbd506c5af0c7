public enum OrchardRuntimePlaceholder {}
